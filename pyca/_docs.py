"""Where pyca's documentation is read: one address, used by ``--help`` and written in
pyproject.toml's [project.urls] (the test test_cli_consistency checks that the two agree). The site
is built from docs/ by scripts/docs.sh (.readthedocs.yaml builds it on Read the Docs)."""

DOCS_URL = "https://pyca3d.readthedocs.io/"


def page(name, anchor=""):
    """The address of a page of the site: page('lddmm') -> DOCS_URL + 'en/latest/lddmm.html'."""
    return f"{DOCS_URL}en/latest/{name}.html" + (f"#{anchor}" if anchor else "")
