"""DuckDB SQL as Spark SQL, for `--engine spark` (tables/spark.py).

The rewrites (`to_spark`) give DuckDB's semantics, not just a function of the same name: list functions
(list_sum as aggregate, len as array_size), JSON (json_valid, `$[*].field` over a list, to_json's nulls),
strptime with a list of formats, regexp_replace's first match and `\\1` groups. What has no faithful rewrite
raises ValueError rather than run with other semantics. Numbers inside JSON text are read as DOUBLE on both
engines; DOUBLE as text differs (`1e-05`, `1.0E-5`), the number it casts to does not. Spark 4 (try_parse_json).

sqlglot is imported here only (the `spark` extra).
"""

from __future__ import annotations

import functools
import re


def _template(sql: str, **parts):
    """A Spark SQL expression with `:name` placeholders filled by (copies of) already translated expressions."""
    from sqlglot import exp

    def fill(node):
        return parts[node.name].copy() if isinstance(node, exp.Placeholder) and node.name in parts else node

    return _parsed(sql).transform(fill)  # transform fills a copy: the parsed template is kept as it is


@functools.lru_cache(maxsize=256)
def _parsed(sql: str):
    """A template parsed once: an export's amounts are cast alike, each through the same few templates, and parsing
    them again for every cast was half of a translation's time."""
    import sqlglot

    return sqlglot.parse_one(sql, read="spark")


def _replacement(text: str, shift: int = 0) -> str:
    """A DuckDB (RE2) regexp_replace replacement in Java's terms: group `\\1` is `$1` (plus `shift`), a literal
    `$` is `\\$`, and `\\\\` stays a backslash."""
    def one(m: re.Match) -> str:
        if m.group(0) == "$":
            return "\\$"
        return f"${int(m.group(1)) + shift}" if m.group(1).isdigit() else m.group(0)

    return re.sub(r"\\(.)|\$", one, text)


def _element_type(node) -> str:
    """The Spark type of a list's elements, where the SQL says it: list_transform(l, lambda a: CAST(a AS T))."""
    from sqlglot import exp

    body = node.args.get("expression").this if isinstance(node, exp.Transform) and \
        isinstance(node.args.get("expression"), exp.Lambda) else None
    if isinstance(body, exp.Cast):
        return body.to.sql(dialect="spark")
    if body is not None and "cast_to" in body.meta:  # a cast already rewritten by _double_to_decimal
        return body.meta["cast_to"]
    raise ValueError(f"cannot translate list_sum to Spark: the type of the list's elements is not in the SQL "
                     f"({node.sql(dialect='duckdb')[:80]}); cast them in a list_transform")


def _double_to_decimal(x, to):
    """CAST(x AS DECIMAL(p, s)) as DuckDB casts a DOUBLE (or FLOAT): the double product w = x * 10^s, rounded half
    away from zero to an integer, exactly; that integer / 10^s. Spark instead reads the double's shortest text
    (16.1539 for 16.15389999999999872...), and on summed amounts the two part at the cent. The integer is built
    from three limbs of w, each exact in a BIGINT: a, its multiples of 2^104; b, of 2^52 below that; and the rest
    rounded (every step is exact in double arithmetic: a power of two scales, a difference that keeps a subset of
    a double's bits, and round(), which rounds a double's shortest text half up, the exact value's rounding).
    Plain expressions, repeated rather than bound by a lambda: Spark compiles them (and computes a repeated one
    once), where a higher-order function would be interpreted on every line. For any other type of x (text,
    integers, decimals) the casts agree: `typeof` is constant, so Spark folds the CASE to one branch."""
    from sqlglot import exp

    scale = int(to.expressions[1].name) if len(to.expressions) > 1 else 0
    spark_type = to.sql(dialect="spark")
    if _not_double(x):  # the CASE below would fold to its ELSE: the plain cast, without x written 17 times over
        cast = exp.Cast(this=x, to=to)
        cast.meta["cast_to"] = spark_type
        return cast
    hi, mid = 2.0 ** 104, 2.0 ** 52
    w = f"(CAST(:x AS DOUBLE) * {float(10 ** scale)!r}D)"
    a = f"CAST({w} / {hi!r}D AS BIGINT)"
    v = f"({w} / {mid!r}D - CAST({a} AS DOUBLE) * {mid!r}D)"  # w's remainder under 2^104, over 2^52: |v| < 2^52
    b = f"CAST({v} AS BIGINT)"
    r = f"(({v} - CAST({b} AS DOUBLE)) * {mid!r}D)"  # w's remainder under 2^52
    n = (f"CAST({a} AS DECIMAL(38,0)) * {int(hi)}BD + CAST({b} AS DECIMAL(38,0)) * {int(mid)}BD + "
         f"CAST(CAST(round({r}) AS BIGINT) AS DECIMAL(38,0))")
    exact = f"CAST(({n}) * CAST('1E-{scale}' AS DECIMAL(38,{scale})) AS {spark_type})"
    case = _template(f"CASE WHEN typeof(:x) IN ('double', 'float') THEN {exact} ELSE CAST(:x AS {spark_type}) END",
                     x=x)
    case.meta["cast_to"] = spark_type  # the type, for list_sum's rewrite (_element_type)
    return case


def _not_double(node) -> bool:
    """Whether a translated expression's Spark type is surely not DOUBLE or FLOAT: a cast to another type, a
    literal written without an exponent (an integer or a DECIMAL in Spark), NULL, or sums, differences, products,
    negations, COALESCE and CASE of those. Each cast of such an amount to DECIMAL is then a plain cast: a sum of casts
    cast again (BilledCost is a cost plus its credits) would otherwise write each inner cast's exact DOUBLE
    conversion into the outer one's many times, a plan Spark takes minutes to optimise."""
    from sqlglot import exp

    if isinstance(node, exp.Cast):
        return node.to.this not in (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT)
    if "cast_to" in node.meta or isinstance(node, exp.Null):
        return True
    if isinstance(node, exp.Literal):
        return not node.is_number or "e" not in node.name.lower()
    if isinstance(node, exp.Paren | exp.Neg):
        return _not_double(node.this)
    if isinstance(node, exp.Add | exp.Sub | exp.Mul):
        return _not_double(node.this) and _not_double(node.expression)
    if isinstance(node, exp.Coalesce):
        return all(_not_double(e) for e in [node.this, *node.expressions])
    if isinstance(node, exp.Case):  # each branch's value (a missing ELSE is NULL)
        values = [i.args["true"] for i in node.args.get("ifs") or []]
        return all(_not_double(v) for v in [*values, node.args.get("default") or exp.Null()])
    return False


def to_spark(sql: str) -> str:
    """DuckDB SQL as Spark SQL: sqlglot's translation, plus rewrites for what it leaves in DuckDB's terms (or
    translates with other semantics). A construct with no faithful translation raises ValueError."""
    import sqlglot
    from sqlglot import exp

    def fix(node: exp.Expression) -> exp.Expression:
        # CAST(x AS DECIMAL(p, s)): a double as DuckDB casts it (exactly x * 10^s, rounded).
        if type(node) is exp.Cast and node.to.this == exp.DataType.Type.DECIMAL:
            return _double_to_decimal(node.this, node.to)
        # timezone('UTC', ts): Spark's session already runs in UTC.
        if isinstance(node, exp.Anonymous) and str(node.this).lower() == "timezone" and \
                len(node.expressions) == 2 and node.expressions[0].name.upper() == "UTC":
            return node.expressions[1]
        # x SIMILAR TO 'p' is a whole-string regular expression match.
        if isinstance(node, exp.SimilarTo) and isinstance(node.expression, exp.Literal):
            return exp.RegexpLike(this=node.this, expression=exp.Literal.string(f"^(?:{node.expression.name})$"))
        # regexp_extract(x, p, ['a', 'b']): a struct of the named groups.
        if isinstance(node, exp.RegexpExtract) and isinstance(node.args.get("group"), exp.Array):
            fields = []
            for i, name in enumerate(node.args["group"].expressions, 1):
                fields += [exp.Literal.string(name.name),
                           exp.RegexpExtract(this=node.this.copy(), expression=node.expression.copy(),
                                             group=exp.Literal.number(i))]
            return exp.Anonymous(this="named_struct", expressions=fields)
        # s[6:] on text: substring from the 6th character.
        if isinstance(node, exp.Bracket) and len(node.expressions) == 1 and \
                isinstance(node.expressions[0], exp.Slice) and node.expressions[0].args.get("expression") is None:
            return exp.Substring(this=node.this, start=node.expressions[0].this)
        # list_sum(l): a sum that skips NULLs and is NULL for no values, as SQL's sum(), in the elements' type
        # (the cast keeps aggregate's accumulator in that type whatever Spark makes of a sum's type).
        if isinstance(node, exp.Anonymous) and str(node.this).lower() == "list_sum" and len(node.expressions) == 1:
            t = _element_type(node.expressions[0])
            summed = _template(f"aggregate(:l, CAST(NULL AS {t}), (__acc, __v) -> "
                               f"CAST(COALESCE(__acc + __v, __acc, __v) AS {t}))", l=node.expressions[0])
            summed.meta["cast_to"] = t  # its type, for a cast of the sum (_not_double)
            return summed
        # len(list), array_length(list): Spark's length() is for text only; array_size, unlike size, keeps NULL
        # as NULL. (len of a bare list column is not told from len of text: it fails on Spark, never misreads.)
        if isinstance(node, exp.ArraySize) or isinstance(node, exp.Length) and (
                isinstance(node.this, (exp.ArrayFilter, exp.Transform, exp.Array, exp.RegexpExtractAll, exp.Split))
                or id(node.this) in lists):
            return exp.Anonymous(this="array_size", expressions=[node.this])
        # json_valid(x): NULL stays NULL.
        if isinstance(node, exp.Anonymous) and str(node.this).lower() == "json_valid" and len(node.expressions) == 1:
            return _template("(try_parse_json(:x) IS NOT NULL OR NULLIF(:x IS NULL, TRUE))", x=node.expressions[0])
        # json_extract_string(j, '$[*].f'): the field of every element that is an object and has it, as a list
        # of text (a string as itself, anything else as its JSON text); [] where j is no array. Spark's
        # get_json_object unwraps a single match.
        if isinstance(node, exp.JSONExtractScalar) and isinstance(node.expression, exp.JSONPath) and \
                node.expression.find(exp.JSONPathWildcard):
            parts = node.expression.expressions
            if [type(p) for p in parts] != [exp.JSONPathRoot, exp.JSONPathSubscript, exp.JSONPathKey] or \
                    not isinstance(parts[1].this, exp.JSONPathWildcard):
                raise ValueError(f"cannot translate the JSON path {node.expression.sql(dialect='duckdb')} to Spark")
            found = _template("CASE WHEN :j IS NOT NULL THEN coalesce(transform(filter(transform("
                              "from_json(:j, 'array<string>'), __e -> from_json(__e, 'map<string, string>')), "
                              "__m -> map_contains_key(__m, :f)), __m -> __m[:f]), array()) END",
                              j=node.this, f=exp.Literal.string(parts[2].name))
            lists.add(id(found))
            return found
        # map_extract_value(MAP {k: v, ...}, x): the value of x's key, NULL where it has none (element_at would
        # fail on a missing key under ANSI SQL).
        if isinstance(node, exp.Anonymous) and str(node.this).lower() == "map_extract_value" and \
                len(node.expressions) == 2 and isinstance(node.expressions[0], exp.ToMap):
            pairs = [x for pair in node.expressions[0].this.expressions for x in (pair.this, pair.expression)]
            return exp.Anonymous(this="try_element_at", expressions=[exp.Anonymous(this="map", expressions=pairs),
                                                                     node.expressions[1]])
        # to_json(x): a NULL field written as null, as DuckDB writes it, not left out.
        if isinstance(node, exp.Anonymous) and str(node.this).lower() == "to_json" and len(node.expressions) == 1:
            return _template("to_json(:x, map('ignoreNullFields', 'false'))", x=node.expressions[0])
        # strptime(x, [formats]): the first format that reads the whole text.
        if isinstance(node, exp.StrToTime) and isinstance(node.args.get("format"), exp.Array):
            return exp.Coalesce(this=exp.StrToTime(this=node.this.copy(), format=node.args["format"].expressions[0]),
                                expressions=[exp.StrToTime(this=node.this.copy(), format=f)
                                             for f in node.args["format"].expressions[1:]])
        # regexp_replace: DuckDB replaces the first match unless told 'g', Spark every match; groups are $1.
        if isinstance(node, exp.RegexpReplace) and isinstance(node.expression, exp.Literal) and \
                isinstance(node.args.get("replacement"), exp.Literal):
            flags = node.args["modifiers"].name if isinstance(node.args.get("modifiers"), exp.Literal) else ""
            if set(flags) - set("gi"):
                raise ValueError(f"cannot translate regexp_replace with options {flags!r} to Spark")
            pattern, replacement = node.expression.name, node.args["replacement"].name
            if "i" in flags:
                pattern = f"(?i){pattern}"
            if "g" in flags:
                replacement = _replacement(replacement)
            else:  # the shortest prefix, then the pattern (group 2, and its groups after it): the first match only
                pattern = f"^(?s:(.*?))({pattern})"
                replacement = "$1" + _replacement(replacement, 2)
            return exp.RegexpReplace(this=node.this, expression=exp.Literal.string(pattern),
                                     replacement=exp.Literal.string(replacement))
        return node

    lists: set[int] = set()  # rewritten expressions that are lists, where sqlglot's node type no longer says so
    tree = sqlglot.parse_one(sql, read="duckdb")
    # Children first, so that a rewrite sees (and keeps) its arguments already in Spark's terms.
    for node in reversed(list(tree.walk(bfs=False))):
        new = fix(node)
        if new is not node:
            node.replace(new)
    return tree.sql(dialect="spark")
