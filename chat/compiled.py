"""The hottest reads and writes, compiled to SQL once per database instead of on every call.

Django builds and compiles a query's SQL each time it runs: for the reads every websocket
push, page request and turn step starts with (a conversation by id and owner, what changed
after a cursor), that was ~85% of their cost; the database's own part was ~15 us of ~430
(measured with SQLite on a 2-core machine). A CompiledQuery asks Django once for the SQL of
a queryset built with stand-in values, then runs that SQL with the real ones and turns the
rows into model instances as Django's own iterator does (its converters, `from_db`, and the
queryset's annotations), so what callers get is what the queryset would have given them.

The writes every change makes (the conversation's row, a message's insert and update:
`save_fields`, `insert`) are the same: Model.save built and compiled an UPDATE or INSERT per
call, ~400 us of Python around ~20 us of database, several times in every transaction of a
turn and an answer. Here each statement's SQL is written once per model, fields and
database, and its values prepared as Model.save prepares them (each field's pre_save and
get_db_prep_save). Neither sends Model.save's signals: no receiver is connected to the
models written this way (chat.models says so).
"""

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.models import Model, QuerySet
from django.db.models.sql import DeleteQuery
from django.db.transaction import TransactionManagementError

# Stand-in values: inside the range of every integer field (Django leaves out a condition on
# a value outside it, which would change the SQL), and none a value a query here compares with.
STAND_IN = 2_000_000_011


@dataclass(frozen=True)
class _Plan:
    """A query's SQL on one database, and how to turn its rows into model instances."""

    sql: str
    # For each parameter of the SQL: the name of the value to put there, or None to keep
    # the constant the SQL was compiled with (constants[i]); and the type the database's
    # adapter wraps such a value in (psycopg's Int8 for a big integer field), if any.
    slots: list[tuple[str | None, type | None]]
    constants: list
    # The columns whose values the database's and the fields' converters turn into Python
    # values (datetimes on SQLite, JSON, ...), with their expressions.
    converted: list[tuple[int, object]]
    model: type[Model]
    fields: list[str]  # the model fields' attnames, in their columns' order
    start: int
    annotations: dict[str, int]  # annotation -> column
    # SELECT ... FOR UPDATE: refused outside a transaction on every database (Django lets it
    # pass on SQLite, which locks with the transaction's BEGIN IMMEDIATE instead).
    locks: bool
    fetch_mode: object  # the queryset's (what its instances load deferred fields with)


class CompiledQuery:
    """`build(**values)` makes the queryset; each of its keyword arguments is a value (an id,
    a cursor, a text key) that only ever appears as a parameter of the SQL, never changes its
    shape."""

    def __init__(self, build: Callable[..., QuerySet]) -> None:
        self.build = build
        self.names = list(inspect.signature(build).parameters)
        self.plans: dict[str, _Plan] = {}

    def all(self, **values) -> list[Model]:
        plan = self._plan(DEFAULT_DB_ALIAS)
        connection = connections[DEFAULT_DB_ALIAS]
        if plan.locks and connection.get_autocommit():
            raise TransactionManagementError(
                "select_for_update cannot be used outside of a transaction."
            )
        params = _params(plan.slots, plan.constants, values)
        with connection.cursor() as cursor:
            cursor.execute(plan.sql, params)
            rows = cursor.fetchall()
        # This thread's connection converts (Django's iterator does the same per query).
        converters = [
            (column, expression, ops)
            for column, expression in plan.converted
            if (
                ops := connection.ops.get_db_converters(expression)
                + expression.get_db_converters(connection)
            )
        ]
        end = plan.start + len(plan.fields)
        found = []
        for row in rows:
            if converters:
                row = list(row)
                for column, expression, ops in converters:
                    value = row[column]
                    for convert in ops:
                        value = convert(value, expression, connection)
                    row[column] = value
            obj = plan.model.from_db(
                DEFAULT_DB_ALIAS, plan.fields, row[plan.start : end], fetch_mode=plan.fetch_mode
            )
            for name, column in plan.annotations.items():
                setattr(obj, name, row[column])
            found.append(obj)
        return found

    def first(self, **values) -> Model | None:
        """The first row's instance, or None (the queryset should ask for at most one)."""
        found = self.all(**values)
        return found[0] if found else None

    def _plan(self, alias: str) -> _Plan:
        plan = self.plans.get(alias)
        if plan is None:
            plan = self.plans[alias] = self._compile(alias)
        return plan

    def _compile(self, alias: str) -> _Plan:
        queryset = self.build(**_stand_ins(self.names))
        compiler = queryset.query.get_compiler(using=alias)
        # A query that locks is compiled in the transaction of its first run (Django checks
        # there is one); each run checks it again (all).
        sql, params = compiler.as_sql()
        slots = _slots(self.names, params)
        klass_info = compiler.klass_info
        columns = compiler.col_count
        select_fields = klass_info["select_fields"]
        start, end = select_fields[0], select_fields[-1] + 1
        return _Plan(
            sql=sql,
            slots=slots,
            constants=list(params),
            converted=[
                (column, expression)
                for column, (_, expression) in compiler.get_converters(
                    [s[0] for s in compiler.select[:columns]]
                ).items()
            ],
            model=klass_info["model"],
            fields=[s[0].target.attname for s in compiler.select[start:end]],
            start=start,
            annotations=dict(compiler.annotation_col_map or {}),
            locks=queryset.query.select_for_update,
            fetch_mode=queryset._fetch_mode,
        )


class CompiledDelete:
    """`build(**values).delete()` of a queryset of one model that nothing cascades from and
    no signal receiver watches (Django's own "fast delete", one DELETE), compiled once per
    database: Django built it on every call, ~200 us of ~240 (a question's draft, deleted with
    every answer). Values as CompiledQuery's. Returns how many rows it deleted."""

    def __init__(self, build: Callable[..., QuerySet]) -> None:
        self.build = build
        self.names = list(inspect.signature(build).parameters)
        self.plans: dict[str, tuple[str, list, list]] = {}

    def __call__(self, **values) -> int:
        connection = connections[DEFAULT_DB_ALIAS]
        plan = self.plans.get(DEFAULT_DB_ALIAS)
        if plan is None:
            query = self.build(**_stand_ins(self.names)).query.chain(DeleteQuery)
            sql, params = query.get_compiler(using=DEFAULT_DB_ALIAS).as_sql()
            plan = self.plans[DEFAULT_DB_ALIAS] = (sql, _slots(self.names, params), list(params))
        sql, slots, constants = plan
        with connection.cursor() as cursor:
            cursor.execute(sql, _params(slots, constants, values))
            return cursor.rowcount


def _stand_ins(names: list[str]) -> dict[str, int]:
    return {name: STAND_IN + 7919 * i for i, name in enumerate(names)}


def _slots(names: list[str], params) -> list[tuple[str | None, type | None]]:
    """The slot (_slot) of each parameter of SQL compiled with _stand_ins(names)."""
    by_value = {value: name for name, value in _stand_ins(names).items()}
    slots = [_slot(p, by_value) for p in params]
    missing = set(names) - {name for name, _ in slots}
    if missing:  # left out, or in a shape of their own: the SQL would not follow them
        raise ValueError(f"{sorted(missing)} are not parameters of the query's SQL")
    return slots


def _params(slots: list, constants: list, values: dict) -> list:
    """The parameters for SQL with these slots (_slots): each value in its slot."""
    return [
        constant if name is None else values[name] if wrap is None else wrap(values[name])
        for constant, (name, wrap) in zip(constants, slots, strict=True)
    ]


def _slot(param, by_value: dict[int, str]) -> tuple[str | None, type | None]:
    """Which value goes where the compiled SQL has `param` (a stand-in, or a constant of the
    query: None), and the type to wrap it in. A text field takes its stand-in as text (a
    session's key): the real value then goes in as a string too."""
    if isinstance(param, int) and not isinstance(param, bool) and param in by_value:
        return by_value[param], None if type(param) is int else type(param)
    if type(param) is str and param.isdigit() and int(param) in by_value:
        return by_value[int(param)], str
    return None, None


@dataclass(frozen=True)
class _Write:
    sql: str
    fields: list  # the fields whose values the statement takes, in order
    returning: tuple  # (SQL, params) of an INSERT's RETURNING clause, if it has one


_writes: dict[tuple, _Write] = {}


def save_fields(instance: Model, fields: Sequence[str] | None = None) -> None:
    """`instance.save(update_fields=fields)` (every field but the primary key for None) of a
    row that exists; raises DatabaseError, as that save does, if it no longer does."""
    if instance.get_deferred_fields():  # Model.save knows which fields it may write
        instance.save(update_fields=fields)
        return
    connection = connections[DEFAULT_DB_ALIAS]
    meta = type(instance)._meta
    key = ("update", type(instance), None if fields is None else tuple(fields), connection.vendor)
    write = _writes.get(key)
    if write is None:
        chosen = (
            [meta.get_field(name) for name in fields]
            if fields is not None
            else [field for field in meta.concrete_fields if not field.primary_key]
        )
        quote = connection.ops.quote_name
        # Names from the model's metadata, quoted by the backend; every value a parameter.
        sql = "UPDATE {} SET {} WHERE {} = %s".format(  # noqa: S608
            quote(meta.db_table),
            ", ".join(f"{quote(field.column)} = %s" for field in chosen),
            quote(meta.pk.column),
        )
        write = _writes[key] = _Write(sql, chosen, ())
    params = [
        field.get_db_prep_save(field.pre_save(instance, False), connection)
        for field in write.fields
    ]
    params.append(meta.pk.get_db_prep_value(instance.pk, connection))
    with connection.cursor() as cursor:
        cursor.execute(write.sql, params)
        if cursor.rowcount != 1:
            raise DatabaseError("Save with update_fields did not affect any rows.")


def insert(instance: Model) -> None:
    """`instance.save(force_insert=True)` for a model with an automatic primary key: the row
    is inserted and the instance gets its id."""
    connection = connections[DEFAULT_DB_ALIAS]
    meta = type(instance)._meta
    key = ("insert", type(instance), connection.vendor)
    write = _writes.get(key)
    if write is None:
        chosen = [field for field in meta.concrete_fields if field is not meta.auto_field]
        quote = connection.ops.quote_name
        sql = "INSERT INTO {} ({}) VALUES ({})".format(  # noqa: S608
            quote(meta.db_table),
            ", ".join(quote(field.column) for field in chosen),
            ", ".join(["%s"] * len(chosen)),
        )
        returning = ()
        if connection.features.can_return_columns_from_insert:
            clause, params = connection.ops.returning_columns([meta.pk])
            sql, returning = f"{sql} {clause}", (clause, params)
        write = _writes[key] = _Write(sql, chosen, returning)
    params = [
        field.get_db_prep_save(field.pre_save(instance, True), connection) for field in write.fields
    ]
    with connection.cursor() as cursor:
        cursor.execute(write.sql, params)
        if write.returning:
            [[pk]] = connection.ops.fetch_returned_rows(cursor, write.returning[1])
        else:
            pk = connection.ops.last_insert_id(cursor, meta.db_table, meta.pk.column)
    instance.pk = pk
    instance._state.adding = False
    instance._state.db = DEFAULT_DB_ALIAS
