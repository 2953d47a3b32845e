"""`make docs`: the parts of docs/developers/architecture.md that are made from the code.

- Between `<!-- imports:begin -->` and `<!-- imports:end -->`: a Mermaid flowchart of which
  app imports which. The apps are the root packages of pyproject.toml's `[tool.importlinter]`,
  the imports those grimp (import-linter's graph) finds in their source, TYPE_CHECKING ones
  too, as import-linter counts them. An arrow is a direct import of one app by another, left
  out when a longer path already says it (a transitive reduction), so the chart stays
  readable. Each app is labelled with the first line of its package's docstring.
- Between `<!-- layers:begin -->` and `<!-- layers:end -->`: the import contracts declared
  there, as `lint-imports` checks them.

`--check` writes nothing, and fails when the page is not what the code makes of it now
(tests/test_docs.py runs it).
"""

import ast
import re
import sys
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "developers" / "architecture.md"
PYPROJECT = ROOT / "pyproject.toml"


def importlinter() -> dict:
    return tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]


def app_imports(apps: list[str]) -> dict[str, set[str]]:
    """For each app, the other apps it imports something of directly."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # grimp finds the packages on sys.path
    graph = grimp.build_graph(*apps, include_external_packages=False, cache_dir=None)
    return {
        importer: {
            imported
            for imported in apps
            if imported != importer
            and graph.direct_import_exists(importer=importer, imported=imported, as_packages=True)
        }
        for importer in apps
    }


def reduced(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The arrows no longer path implies: a → c goes when a → b → … → c. The layers contract
    keeps the apps' graph acyclic, which makes this reduction unique."""

    def reachable(start: str) -> set[str]:
        seen: set[str] = set()
        stack = [start]
        while stack:
            for node in edges[stack.pop()]:
                if node not in seen:
                    seen.add(node)
                    stack.append(node)
        return seen

    return {
        app: {
            target
            for target in targets
            if not any(target in reachable(other) for other in targets - {target})
        }
        for app, targets in edges.items()
    }


def top_down(apps: list[str], edges: dict[str, set[str]]) -> list[str]:
    """The apps, each before every app it imports; otherwise in pyproject.toml's order."""
    placed: list[str] = []
    while len(placed) < len(apps):
        ready = [
            app
            for app in apps
            if app not in placed
            and not any(app in edges[other] for other in apps if other not in placed)
        ]
        if not ready:
            raise SystemExit(f"architecture: the apps import each other in a circle: {edges}")
        placed.append(ready[0])
    return placed


def description(app: str) -> str:
    """The first line of the app's package docstring (its `__init__.py`)."""
    init = ROOT / app / "__init__.py"
    docstring = ast.get_docstring(ast.parse(init.read_text()))
    if not docstring:
        raise SystemExit(
            f"architecture: {init.relative_to(ROOT)} has no docstring; its first line labels "
            "the app in the diagram"
        )
    return docstring.splitlines()[0].rstrip(".").replace('"', "#quot;")


def flowchart() -> str:
    apps = importlinter()["root_packages"]
    edges = app_imports(apps)
    arrows = reduced(edges)
    order = top_down(apps, edges)
    lines = ["```mermaid", "flowchart TD"]
    lines += [f'    {app}["{app}<br/>{description(app)}"]' for app in order]
    for app in order:
        if targets := [target for target in order if target in arrows[app]]:
            lines.append(f"    {app} --> {' & '.join(targets)}")
    lines.append("```")
    return "\n".join(lines)


def modules(expressions: list[str]) -> str:
    return ", ".join(f"`{expression}`" for expression in expressions)


def layers() -> str:
    """Each contract on one line: its name (what comes before a colon in bold), then what it
    declares."""
    lines = []
    for contract in importlinter()["contracts"]:
        match contract["type"]:
            case "layers":
                where = contract.get("containers")
                inside = f"in {modules(where)}: " if where else ""
                said = inside + " > ".join(f"`{layer}`" for layer in contract["layers"])
            case "forbidden":
                said = (
                    f"{modules(contract['source_modules'])} imports none of "
                    f"{modules(contract['forbidden_modules'])}"
                )
            case "acyclic_siblings":
                said = (
                    "none between modules or packages side by side, anywhere inside "
                    f"{modules(contract['ancestors'])}"
                )
            case other:
                raise SystemExit(f"architecture: say how a contract of type {other!r} reads")
        head, colon, gloss = contract["name"].partition(": ")
        name = f"**{head}**: {gloss}" if colon else f"**{head}**"
        lines.append(f"- {name} — {said}.")
    return "\n".join(lines)


def generated(page: str) -> str:
    """The page with its generated parts made again."""
    for part, make in (("imports", flowchart), ("layers", layers)):
        begin, end = f"<!-- {part}:begin -->", f"<!-- {part}:end -->"
        pattern = re.compile(rf"{re.escape(begin)}\n.*?{re.escape(end)}", re.DOTALL)
        if len(pattern.findall(page)) != 1:
            raise SystemExit(f"architecture: {PAGE.name} needs one {begin} … {end}")
        page = pattern.sub(lambda _, b=begin, e=end, m=make: f"{b}\n{m()}\n{e}", page)
    return page


def main() -> None:
    page = PAGE.read_text()
    made = generated(page)
    if "--check" in sys.argv[1:]:
        if made != page:
            raise SystemExit(f"{PAGE.relative_to(ROOT)} is not what the code makes: run make docs")
        return
    if made != page:
        PAGE.write_text(made)
        print(f"architecture: {PAGE.relative_to(ROOT)} updated")


if __name__ == "__main__":
    main()
