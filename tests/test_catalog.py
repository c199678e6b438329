"""The catalog's instance-family rule is written once for Python and once for SQL: the two must agree."""

import duckdb

from auditor.providers.catalog import family_of, family_sql, load_catalog
from auditor.sql import lit

CATALOG = load_catalog()
TYPES = [(p, t.name) for p in ("aws", "gcp", "azure") for t in CATALOG.instance_types(p)]
TYPES += [("aws", "ml.p4d.24xlarge"), ("aws", "ml.g5.xlarge"), ("gcp", "a3-megagpu-8g"), ("oracle", "BM.GPU4.8")]


def test_family_sql_agrees_with_family_of():
    con = duckdb.connect()
    got = con.execute("SELECT " + ", ".join(family_sql(lit(p), lit(t)) for p, t in TYPES)).fetchone()
    assert list(got) == [family_of(p, t) for p, t in TYPES]
    assert len(TYPES) > 50
