"""Docs that cannot drift: every module, file and name the docs give is in the code, every app
has its section in docs/developers/architecture.md, and the page's generated parts (the import
diagram, the layers) are what scripts/architecture.py makes of the code now (`make docs`).

What is read as a name, in a code span (`...`) outside fenced blocks:

- a path, `chat/transcript.py`, `docs/bench/`, `tests/x.py::test_y`: from the checkout's root
  when it starts with an app or a tracked folder; a bare one (`models.py`, `engine/`) from the
  package of the section it is in (`## chat`, `### The turn engine (`chat/engine/`)`);
- a template, `chat/conversation.html#message`: the file, and its partial;
- a dotted name, `chat.engine.turns`, `chat.selectors.conversation_for_user`,
  `chat.engine.tools.prepare()`: the longest part that is a module is found, and imported when
  more follows, which is read with getattr. When its first part is no importable module
  (`turns.begin_turn`, `QuestionTool.run`), it is read from the modules of that name, else the
  modules that define it, in the section's package first. A string the code itself holds (an
  event's type, `chat.changed`) also counts;
- in an app's tables, the first column's modules (`selectors.py`, `views.py, admin.py`,
  `live/`), relative to the section's package; and the other columns' names
  (`conversation_for_user`, `StreamSlot`): something a module of the apps defines (a setting:
  config.settings), or a string the code holds (a state, a block's type).

`manage.py NAME` and `make NAME`: a management command, a target of the Makefile.

docs/developers/ is read whole; the other pages (decision records, integrators, operators, the
README and SECURITY.md) for names that say where they are from: paths and dotted names that
start with an importable module.
"""

import ast
import importlib
import importlib.util
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from django.core.management import get_commands

ROOT = Path(__file__).resolve().parent.parent
APPS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
ARCHITECTURE = ROOT / "docs" / "developers" / "architecture.md"
# Pages read whole, relative names too.
DEVELOPERS = sorted((ROOT / "docs" / "developers").glob("*.md"))
# Pages read for paths and importable dotted names only.
OTHERS = [
    *sorted((ROOT / "docs" / "developers" / "decisions").glob("*.md")),
    *sorted((ROOT / "docs" / "integrators").glob("*.md")),
    *sorted((ROOT / "docs" / "operators").glob("*.md")),
    ROOT / "README.md",
    ROOT / "SECURITY.md",
]
# Folders of the checkout a path may start with, besides the apps.
FOLDERS = {
    "bench",
    "deploy",
    "docs",
    "examples",
    "locale",
    "scripts",
    "static",
    "templates",
    "tests",
}
TEMPLATES = ROOT / "templates"

CODE_SPAN = re.compile(r"`([^`\n]+)`")
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
IDENTIFIER = r"[A-Za-z_]\w*"
DOTTED = re.compile(rf"^{IDENTIFIER}(\.{IDENTIFIER})*(\(.*\))?$")
PATH = re.compile(r"^[\w.@-]+(/[\w.@*-]+)*/?(::\w+)?$")
# A file by its name alone: `models.py` (in its app's section), `pyproject.toml`, `uv.lock`.
FILE = re.compile(r"^[\w.-]+\.(py|toml|lock|md|json|txt|cfg|ini|yml|yaml|sh|js|css)$")
TEMPLATE = re.compile(r"^[\w/-]+\.html(#\w+)?$")
COMMAND = re.compile(r"^(?:python )?manage\.py ([\w-]+)")
MAKE = re.compile(r"^make ([\w-]+)")


@dataclass(frozen=True)
class Name:
    page: str
    line: int
    text: str
    # The package of the section the name is in ("chat", "chat.engine"), or None.
    package: str | None
    # In the first column of a table: a module of `package`.
    module_cell: bool = False
    # In another column of a table.
    table_cell: bool = False

    def problem(self, why: str) -> str:
        return f"{self.page}:{self.line}: `{self.text}` {why}"


def names(page: str, text: str) -> list[Name]:
    """The code spans of a markdown page, outside fenced blocks, each with its section's
    package."""
    found = []
    fenced = False
    headings: list[tuple[int, str | None]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if heading := HEADING.match(line):
            level = len(heading[1])
            headings = [(lvl, pkg) for lvl, pkg in headings if lvl < level]
            headings.append((level, heading_package(heading[2])))
            continue
        package = next((pkg for _, pkg in reversed(headings) if pkg), None)
        cells = line.strip().strip("|").split("|") if line.lstrip().startswith("|") else []
        first_cell = cells[0] if len(cells) > 1 else ""
        for span in CODE_SPAN.finditer(line):
            in_first_cell = bool(first_cell) and span.start() < line.index(first_cell) + len(
                first_cell
            )
            found.append(Name(page, number, span[1].strip(), package, in_first_cell, bool(cells)))
    return found


def heading_package(heading: str) -> str | None:
    """`## chat` is chat's section; `### The turn engine (`chat/engine/`)`, chat.engine's."""
    if spans := CODE_SPAN.findall(heading):
        path = spans[0].strip("/")
        if path.split("/")[0] in APPS:
            return path.replace("/", ".")
    words = heading.replace("`", "").split()
    return words[0] if words and words[0] in APPS else None


def problems(page: str, text: str, *, whole: bool) -> list[str]:
    """What in the page names nothing. `whole`: relative names too (docs/developers)."""
    found = []
    for name in names(page, text):
        if command := COMMAND.match(name.text):
            why = None if command[1] in get_commands() else "is no management command"
        elif target := MAKE.match(name.text):
            why = None if target[1] in make_targets() else "is no target of the Makefile"
        elif name.module_cell and name.package and whole:
            why = module_cell_problem(name)
        elif TEMPLATE.match(name.text):
            why = template_problem(name.text)
        elif PATH.match(name.text) and ("/" in name.text or FILE.match(name.text)):
            why = path_problem(name, whole=whole)
        elif DOTTED.match(name.text) and "." in name.text:
            why = dotted_problem(name, whole=whole)
        elif name.table_cell and name.package and whole and DOTTED.match(name.text):
            why = identifier_problem(name)
        else:
            why = None
        if why:
            found.append(name.problem(why))
    return found


def module_cell_problem(name: Name) -> str | None:
    """`selectors.py`, `views.py, admin.py`, `live/`, `engine.tools` in an app's table."""
    base = ROOT.joinpath(*name.package.split("."))
    for module in (part.strip() for part in name.text.split(",")):
        path = module.rstrip("/").removesuffix(".py").replace(".", "/")
        if not (base / f"{path}.py").is_file() and not (base / path / "__init__.py").is_file():
            return f"is no module of {name.package}"
    return None


def template_problem(text: str) -> str | None:
    path, _, partial = text.partition("#")
    template = TEMPLATES / path
    if not template.is_file():
        return "is no template"
    if partial and not re.search(rf"{{%\s*partialdef\s+{partial}\b", template.read_text()):
        return f"is no partial of {path}"
    return None


def path_problem(name: Name, *, whole: bool) -> str | None:
    path, _, test = name.text.partition("::")
    top = path.split("/")[0]
    if top in APPS or top in FOLDERS:
        places = [ROOT / path]
    elif "/" in path.rstrip("/") or not whole:
        return None  # a URL's path, an MCP method's name: not the checkout's
    else:  # `models.py`, `engine/`: in the section's package; `pyproject.toml`
        package = [ROOT.joinpath(*name.package.split(".")) / path] if name.package else []
        places = [*package, ROOT / path]
    found = [match for place in places for match in place.parent.glob(place.name)]
    if not found:
        return "is no file"
    if test and test not in defined_names(found[0]):
        return f"is not defined in {path}"
    return None


def dotted_problem(name: Name, *, whole: bool) -> str | None:
    dotted = re.sub(r"\(.*\)$", "", name.text)
    if dotted in string_constants():
        return None  # an event's type, a group's name: what the code sends
    first, _, rest = dotted.partition(".")
    if importable(first):
        return None if resolves(dotted) else "is not in the code"
    if not whole:
        return None
    candidates = modules_named(first, name.package) or modules_named(first, None)
    if not candidates:
        return "names no module, and nothing a module defines"
    if any(resolves(f"{candidate}.{rest}") for candidate in candidates):
        return None
    return f"is not in {' or '.join(candidates)}"


def identifier_problem(name: Name) -> str | None:
    """`conversation_for_user`, `StreamSlot` in an app's table: defined by a module of the apps
    (a setting, in config.settings), or a string the code holds (a state, a block's type)."""
    identifier = re.sub(r"\(.*\)$", "", name.text)
    if identifier in string_constants() or any(
        identifier in defined_names(path) | imported_names(path) for path in app_modules().values()
    ):
        return None
    return "is defined nowhere in the apps"


@cache
def make_targets() -> frozenset[str]:
    rule = re.compile(r"^([\w -]+):(?!=)", re.MULTILINE)
    return frozenset(
        target
        for targets in rule.findall((ROOT / "Makefile").read_text())
        for target in targets.split()
    )


@cache
def importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def resolves(dotted: str) -> bool:
    """The longest importable prefix of `dotted`, then getattr for each part after it."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        module = ".".join(parts[:end])
        if not importable(module):
            continue
        target = importlib.import_module(module)
        for attribute in parts[end:]:
            if attribute in getattr(target, "model_fields", {}):
                return True  # a pydantic model's field: no class attribute
            try:
                target = getattr(target, attribute)
            except AttributeError:
                return False
        return True
    return False


@cache
def app_modules() -> dict[str, Path]:
    """Every module of the apps, by dotted name."""
    modules = {}
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def modules_named(first: str, package: str | None) -> list[str]:
    """What `first` can mean among the app modules (in `package`, if one is given): the
    modules named so (`turns`: chat.engine.turns); else what a module defines by that name
    (`QuestionTool`: questions.tools.QuestionTool); else what one imports (`AppConfig`)."""
    inside = {
        module: path
        for module, path in app_modules().items()
        if package is None or module == package or module.startswith(f"{package}.")
    }
    for found in (
        [module for module in inside if module.rsplit(".", 1)[-1] == first],
        [f"{module}.{first}" for module, path in inside.items() if first in defined_names(path)],
        [f"{module}.{first}" for module, path in inside.items() if first in imported_names(path)],
    ):
        if found:
            return sorted(found)
    return []


@cache
def defined_names(path: Path) -> frozenset[str]:
    """What a module defines at its top level: functions, classes, assignments."""
    defined = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(target.id for target in targets if isinstance(target, ast.Name))
    return frozenset(defined)


@cache
def imported_names(path: Path) -> frozenset[str]:
    """What a module imports at its top level, by the names it has then."""
    return frozenset(
        (alias.asname or alias.name).split(".")[0]
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    )


@cache
def string_constants() -> frozenset[str]:
    return frozenset(
        node.value
        for path in app_modules().values()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def architecture_script():
    spec = importlib.util.spec_from_file_location(
        "architecture", ROOT / "scripts" / "architecture.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_every_app_has_a_section_in_the_architecture_page():
    sections = {
        heading_package(heading[2])
        for line in ARCHITECTURE.read_text().splitlines()
        if (heading := HEADING.match(line))
    }
    missing = [app for app in APPS if app not in sections]
    assert not missing, f"{relative(ARCHITECTURE)} has no section for {', '.join(missing)}"


def test_every_module_file_and_name_the_docs_give_is_in_the_code():
    found = [
        problem
        for pages, whole in ((DEVELOPERS, True), (OTHERS, False))
        for page in pages
        for problem in problems(relative(page), page.read_text(), whole=whole)
    ]
    assert not found, "Names in the docs that are not in the code:\n" + "\n".join(found)


def test_the_architecture_page_shows_the_imports_and_layers_of_the_code_now():
    page = ARCHITECTURE.read_text()
    assert architecture_script().generated(page) == page, (
        f"{relative(ARCHITECTURE)}: the diagram or the layers differ from the code: run make docs"
    )


def test_the_diagram_draws_each_import_between_apps_once_without_the_implied_ones():
    script = architecture_script()
    edges = {"top": {"middle", "bottom"}, "middle": {"bottom"}, "bottom": set(), "side": set()}
    assert script.reduced(edges) == {
        "top": {"middle"},
        "middle": {"bottom"},
        "bottom": set(),
        "side": set(),
    }
    assert script.top_down(["bottom", "side", "middle", "top"], edges) == [
        "side",
        "top",
        "middle",
        "bottom",
    ]


def test_the_check_reports_every_name_that_is_not_in_the_code():
    page = """\
# A page

`chat.engine.turns`, `chat.selectors.conversation_for_user`, `turns.begin_turn`, `chat.changed`,
`chat/transcript.py`, `chat/conversation.html#message`, `manage.py worker`, `make docs`.
Not in the code: `chat.engine.gone`, `chat.selectors.gone`, `turns.gone`, `chat/gone.py`,
`chat/conversation.html#gone`, `nothing_here.gone`, `manage.py gone`, `make gone`,
`tests/test_docs.py::test_gone`.

## chat

| module | what it holds |
|---|---|
| `selectors.py` | reads |
| `views.py`, `gone.py` | pages |
| `engine/` | the engine: `Need`, `gone_function` |
| `nowhere/` | nothing |

```
`chat.in_a_fence`
```
"""
    found = problems("page.md", page, whole=True)
    assert [problem.split(":", 2)[1:] for problem in found] == [
        ["5", " `chat.engine.gone` is not in the code"],
        ["5", " `chat.selectors.gone` is not in the code"],
        ["5", " `turns.gone` is not in chat.engine.turns"],
        ["5", " `chat/gone.py` is no file"],
        ["6", " `chat/conversation.html#gone` is no partial of chat/conversation.html"],
        ["6", " `nothing_here.gone` names no module, and nothing a module defines"],
        ["6", " `manage.py gone` is no management command"],
        ["6", " `make gone` is no target of the Makefile"],
        ["7", " `tests/test_docs.py::test_gone` is not defined in tests/test_docs.py"],
        ["14", " `gone.py` is no module of chat"],
        ["15", " `gone_function` is defined nowhere in the apps"],
        ["16", " `nowhere/` is no module of chat"],
    ]
