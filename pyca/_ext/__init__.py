"""Compiled CPU loops (Cython) of pyca's own dispatched operations; see pyca.ext."""
