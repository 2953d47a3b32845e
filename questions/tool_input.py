"""A tool's input, as a person gives it, checked in bounded time on the request's thread.

- JSON Schema (jsonschema) with every regular expression of the schema (`pattern`,
  `patternProperties`, and so `additionalProperties`) matched by RE2, in time linear in the
  text: Python's `re` backtracks, holding the interpreter lock for as long as a hostile pattern
  takes (`^(a+)+$` against 26 characters: seconds, during which the process answers nobody).
  A pattern RE2 cannot compile (backreferences, lookaround) is never run: UncheckablePattern.
- `uniqueItems` by hashing, in linear time (jsonschema compares objects pairwise).
- `$ref`s resolve within the schema and the JSON Schema drafts only: nothing is fetched.
- Nesting depth counted without recursion, for JSON text before it is parsed and for values,
  so that neither the parser nor anything after it runs out of stack.
"""

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import jsonschema
import re2
import referencing
import referencing.exceptions
from jsonschema import ValidationError

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is the caller's answer, not a log line


class UncheckablePattern(Exception):
    """The schema holds a regular expression that cannot be matched in linear time."""

    def __init__(self, pattern: str) -> None:
        super().__init__(pattern)
        self.pattern = pattern


@lru_cache(maxsize=256)
def _compiled(pattern: str):
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error:
        raise UncheckablePattern(pattern) from None


def _pattern(validator, pattern, instance, schema) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string") or not isinstance(pattern, str):
        return
    if not _compiled(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator, patterns, instance, schema) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object") or not isinstance(patterns, dict):
        return
    for pattern, subschema in patterns.items():
        regex = _compiled(pattern)
        for key, value in instance.items():
            if regex.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator, additional, instance, schema) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    patterns = schema.get("patternProperties")
    regexes = [_compiled(p) for p in patterns] if isinstance(patterns, dict) else []
    extras = [
        key
        for key in instance
        if key not in declared and not any(regex.search(key) for regex in regexes)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False and extras:
        yield ValidationError(_unexpected(sorted(extras), patterns))


def _unexpected(extras: list[str], patterns: Any) -> str:
    """jsonschema's own words for properties that additionalProperties refuses."""
    names = ", ".join(repr(extra) for extra in extras)
    if isinstance(patterns, dict):
        verb = "does" if len(extras) == 1 else "do"
        regexes = ", ".join(repr(pattern) for pattern in sorted(patterns))
        return f"{names} {verb} not match any of the regexes: {regexes}"
    verb = "was" if len(extras) == 1 else "were"
    return f"Additional properties are not allowed ({names} {verb} unexpected)"


def _unique_items(validator, unique, instance, schema) -> Iterator[ValidationError]:
    if unique is not True or not validator.is_type(instance, "array"):
        return
    if len({_identity(item) for item in instance}) < len(instance):
        yield ValidationError(f"{instance!r} has non-unique elements")


def _identity(value: Any) -> Any:
    """A hashable key equal for JSON values JSON Schema holds equal (1 and 1.0; not true and 1;
    objects whatever their keys' order). Callers bound the value's depth (nesting_depth)."""
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, list):
        return ("array", tuple(_identity(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _identity(item)) for key, item in value.items()))
    return ("value", value)


_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
}
_DRAFTS = (
    jsonschema.Draft3Validator,
    jsonschema.Draft4Validator,
    jsonschema.Draft6Validator,
    jsonschema.Draft7Validator,
    jsonschema.Draft201909Validator,
    jsonschema.Draft202012Validator,
)
_BOUNDED = {
    draft: jsonschema.validators.extend(
        draft, {k: f for k, f in _KEYWORDS.items() if k in draft.VALIDATORS}
    )
    for draft in _DRAFTS
}


def schema_error(value: Any, schema: dict) -> ValidationError | None:
    """The most relevant error of `value` against `schema` (jsonschema's best_match), under the
    draft its `$schema` names (2020-12 when it names none); None when it fits, and when the
    schema itself is broken (the server judges the call then). Raises UncheckablePattern when
    a pattern that cannot be checked in linear time would decide."""
    patterns = [
        pattern
        for found in _found(schema, "patternProperties")
        if isinstance(found, dict)
        for pattern in found
    ]
    if patterns and _found(schema, "unevaluatedProperties"):
        # jsonschema finds the keys that unevaluatedProperties leaves with Python's `re`.
        raise UncheckablePattern(str(patterns[0]))
    draft = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
    validator = _BOUNDED.get(draft, _BOUNDED[jsonschema.Draft202012Validator])
    try:
        # A schema that is not JSON Schema ("type": 5) would make the keywords raise.
        validator.check_schema(schema)
        errors = validator(schema, registry=referencing.Registry()).iter_errors(value)
        return jsonschema.exceptions.best_match(errors)
    except (jsonschema.exceptions.SchemaError, referencing.exceptions.Unresolvable):
        return None


def _found(schema: Any, keyword: str) -> list[Any]:
    """Every value of `keyword` anywhere in `schema`."""
    found, stack = [], [schema]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if keyword in item:
                found.append(item[keyword])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def nesting_depth(value: Any, *, limit: int) -> int:
    """How deeply arrays and objects nest in `value` (a scalar: 0), counted up to `limit` + 1."""
    deepest, stack = 0, [(value, 1)]
    while stack and deepest <= limit:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            stack.extend(
                (child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)
            )
    return deepest


# What decides the nesting of JSON text: brackets, quotes, and escapes (a backslash and the
# character after it, which never opens or closes anything).
_STRUCTURE = re.compile(r'\\.|["\[\]{}]', re.DOTALL)


def text_nesting_depth(text: str | bytes) -> int:
    """How deeply arrays and objects nest in JSON text, read without parsing it (brackets in
    strings do not count): text too deep for the parser's stack can be refused first."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    depth = deepest = 0
    in_string = False
    for token in _STRUCTURE.finditer(text):
        char = token.group()
        if char == '"':
            in_string = not in_string
        elif in_string or len(char) == 2:
            continue
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest
