"""Finding the syntax tree of a kernel's or helper's Python function (pyca.kernels): its `def`
block, or, for a lambda, the lambda node on its first line in the file's tree; memoised by code
object."""
from __future__ import annotations

import ast
import inspect
import linecache

__all__ = ["KernelSyntaxError", "function_node"]


class KernelSyntaxError(TypeError):
    """A kernel or helper uses something pyca cannot compile; the message names the function, the
    source line and the construct."""


_tree_cache: dict[str, tuple] = {}


def _file_tree(filename: str):
    lines = linecache.getlines(filename)
    key = (len(lines), hash("".join(lines[:50])) if lines else 0)
    hit = _tree_cache.get(filename)
    if hit is not None and hit[0] == key:
        return hit[1], lines
    try:
        tree = ast.parse("".join(lines))
    except SyntaxError:
        tree = None
    _tree_cache[filename] = (key, tree)
    return tree, lines


_node_cache: dict = {}


def function_node(fn):
    """(the FunctionDef or Lambda node of `fn`, its source lines, its file name), memoised by code
    object."""
    hit = _node_cache.get(fn.__code__)
    if hit is None:
        hit = _node_cache[fn.__code__] = _function_node(fn)
    return hit


def _block(lines, first):
    """The lines of the definition whose first line (a decorator or the def) is lines[first - 1]: up to
    the first code line after the def line indented no deeper than it. Not inspect.getblock: its
    tokenizer costs ~7 ms at its first use in a process. A cut inside a string or brackets leaves text
    that does not parse, and the caller then parses the whole file."""
    head = lines[first - 1]
    ind = len(head) - len(head.lstrip())
    out, in_body = [head], head.lstrip().startswith(("def ", "async def "))
    for ln in lines[first:]:
        code = ln.strip()
        if code and not code.startswith("#"):
            cur = len(ln) - len(ln.lstrip())
            if in_body and cur <= ind:
                break
            if cur == ind and code.startswith(("def ", "async def ")):
                in_body = True
        out.append(ln)
    return out


def _function_node(fn):
    code = fn.__code__
    filename = code.co_filename
    linecache.checkcache(filename)
    name = fn.__name__
    if name != "<lambda>":  # parse the definition's block only (fast)
        lines = linecache.getlines(filename)
        first = code.co_firstlineno
        if 0 < first <= len(lines):
            import textwrap

            try:
                block = _block(lines, first)
                mod = ast.parse(textwrap.dedent("".join(block)))
                node = mod.body[0] if mod.body else None
                if isinstance(node, ast.FunctionDef) and node.name == name:
                    ast.increment_lineno(mod, first - 1)
                    return node, lines, filename
            except (SyntaxError, IndentationError, IndexError):
                pass
    tree, lines = _file_tree(filename)
    if tree is not None:
        cands = []
        for node in ast.walk(tree):
            if name == "<lambda>" and isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno:
                cands.append(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                if first == code.co_firstlineno or node.lineno == code.co_firstlineno:
                    cands.append(node)
        if len(cands) > 1 and name == "<lambda>":
            cands = [c for c in cands if _same_lambda(c, code)] or cands
        if cands:
            return cands[0], lines, filename
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        raise KernelSyntaxError(f"pyca kernel {fn.__qualname__}: its source code is not available (functions defined "
                                "with exec or at an interactive prompt cannot be compiled; define it in a file)") from None
    import textwrap

    src = textwrap.dedent(src)
    try:
        mod = ast.parse(src)
    except SyntaxError:
        raise KernelSyntaxError(f"pyca kernel {fn.__qualname__}: cannot read its source") from None
    off = code.co_firstlineno - 1
    for node in ast.walk(mod):
        if isinstance(node, (ast.FunctionDef, ast.Lambda)):
            ast.increment_lineno(mod, off)
            return node, linecache.getlines(filename) or [""] * (off + 1) + src.splitlines(True), filename
    raise KernelSyntaxError(f"pyca kernel {fn.__qualname__}: cannot find its definition in its source")


def _same_lambda(node, code) -> bool:
    if [a.arg for a in node.args.args] != list(code.co_varnames[: code.co_argcount]):
        return False
    try:
        c = compile(ast.Expression(node), "<lambda>", "eval")
        inner = next(k for k in c.co_consts if inspect.iscode(k))
        return inner.co_code == code.co_code and inner.co_names == code.co_names
    except Exception:
        return True
