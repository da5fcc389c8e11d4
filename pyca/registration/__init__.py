"""Registration building blocks: the parts that pyca's registration programs (``pyca.apps``:
lddmm, affine, atlas, batch) are composed of, each public and documented, so that the next metric,
transform or optimiser has a home.

- ``pyca.registration.metrics``: image match terms (energy and gradient with respect to the
  deformed image), on CPU and GPU alike: SSD, LNCC, MI (mutual information, different contrasts).
- ``pyca.registration.interpolation``: the bias trilinear interpolation gives a warped image, as
  a match's target (``InterpTarget``; lddmm's and syn's 'matched' interpolation blur).
- ``pyca.registration.quality``: did a finished registration fail (folds, collapse, a match worse
  than the linear stage's, a single-modality metric on different contrasts)?
- ``pyca.registration.transforms``: grids and pyramids, affine maps and their H-fields, flows of
  velocity fields, Jacobian determinants.
- ``pyca.registration.optimisers``: step rules (LDDMM's automatic step with halving and undo).
- ``pyca.registration.parameters``: one declaration of every registration parameter, from which
  the checks, the command line's options and --help, and ``-p KEY=VALUE`` are built.
- ``pyca.registration.intensities``: what the images are compared as (robust scaling, histogram
  matching, the fixed image's blur, the bias gain).
- ``pyca.registration.transform_files``: transforms as ANTs and ITK files (affines, displacement
  fields), written and read (docs/transforms.md).
- ``pyca.registration.inputs``: images, masks and label maps brought onto their reference grid by
  their own affine (``on_grid``); label maps with integer values (``LabelImage``).
- ``pyca.registration.apply``: images, label maps and points through pyca's or ANTs' transforms
  (``pyca.apply_transforms``, ``pyca apply``).

The design and the roles of the modules: docs/design/registration.md.
"""
