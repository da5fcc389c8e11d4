#!/usr/bin/env bash
# Builds the documentation site into build/docs/site (open build/docs/site/index.html):
# docs/*.md plus the API reference generated from ops/*.yaml and the installed pyca's docstrings
# (tools/opgen/apidocs.py), with `mkdocs build --strict`: any warning (a broken link, a missing
# page) fails the build. Needs pyca installed (bash scripts/test.sh or pip install .); installs the
# `docs` extra's packages (pyproject.toml) when MkDocs is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if ! python3 -c "import mkdocs" 2>/dev/null; then
  mapfile -t reqs < <(python3 -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['docs']))")
  python3 -m pip install -q "${reqs[@]}"
fi
if ! (cd /tmp && python3 -c "import pyca") 2>/dev/null; then
  echo "docs: pyca is not installed; run bash scripts/test.sh or pip install . first" >&2
  exit 1
fi
src=build/docs/src
rm -rf "$src" build/docs/site
mkdir -p "$src"
cp -r docs/. "$src/"
# Links from docs/ to other files of the repository (examples/, scripts/) are not pages of the site:
# they become the path in code font. Links to missing files are left for MkDocs to report.
python3 - "$src" <<'PY'
import pathlib, re, sys
src, repo = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path.cwd().resolve()
link = re.compile(r"\[([^\]]*)\]\((?!https?:|#|mailto:)([^)#\s]+)(#[^)]*)?\)")
for page in src.rglob("*.md"):
    rel = page.relative_to(src)
    def fix(m):
        target = (repo / "docs" / rel.parent / m[2]).resolve()
        if target.is_relative_to(repo / "docs") or not target.exists():
            return m[0]
        return f"{m[1]} (`{target.relative_to(repo)}`)"
    page.write_text(link.sub(fix, page.read_text()))
PY
# Run from outside the checkout so that `import pyca` is the installed package, not ./pyca.
(cd /tmp && PYTHONPATH="$root/tools" python3 -m opgen.apidocs --ops-dir "$root/ops" --out "$root/$src/reference")
# (no --quiet: MkDocs counts the warnings for --strict only when it logs them)
python3 -m mkdocs build --strict -f mkdocs.yml
echo "docs: built $root/build/docs/site/index.html"
