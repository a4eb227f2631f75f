"""The cheaper forms of what booking mints per settlement give exactly what the general forms
gave: the id's text, the rail key's bytes, the Avro event's fit check, a series per outcome."""

from __future__ import annotations

import hashlib
import json
import re
import uuid

from hypothesis import given
from hypothesis import strategies as st

from services.contracts.avro_schema import conforms
from services.domain.ids import uuid7, uuid7_text
from services.domain.rail_key import SCHEME, rail_idempotency_key
from services.ledger.metrics import REQUEST_OUTCOMES, create_metrics
from services.ledger.model import Outcome

UUID7 = re.compile("[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
TEXT = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40)


def test_a_text_id_is_a_canonical_uuid7_in_time_order() -> None:
    before = str(uuid7())
    ids = [uuid7_text() for _ in range(200)]
    assert all(UUID7.fullmatch(i) and str(uuid.UUID(i)) == i for i in ids)
    assert all(uuid.UUID(i).version == 7 for i in ids)
    assert before[:13] <= ids[0][:13] <= ids[-1][:13]  # milliseconds lead
    assert len(set(ids)) == len(ids)


@given(TEXT, st.uuids(), TEXT, st.integers(1, 2**63 - 1))
def test_the_rail_key_hashes_the_bytes_json_dumps_gave(
    tenant: str, settlement_id: uuid.UUID, destination: str, amount: int
) -> None:
    fields = [SCHEME, tenant, str(settlement_id), destination, amount, "EUR"]
    v1 = json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    expected = hashlib.sha256(v1).hexdigest()
    for spelling in (str(settlement_id), str(settlement_id).upper(), f"{{{settlement_id}}}"):
        assert rail_idempotency_key(tenant, spelling, destination, amount, "EUR") == expected


def test_an_optional_field_takes_its_types_exactly_and_nothing_else() -> None:
    fits = conforms(
        {
            "type": "record",
            "name": "R",
            "fields": [
                {"name": "note", "type": ["null", "string"]},
                {"name": "count", "type": ["null", "long"]},
            ],
        }
    )
    assert fits({"note": None, "count": None}) and fits({"note": "x", "count": 2**62})
    for note in (1, b"x", True, 1.0):
        assert not fits({"note": note, "count": 1})
    for count in ("1", True, 2**63, 1.0):
        assert not fits({"note": "x", "count": count})


def test_every_outcome_of_a_request_has_a_series_from_the_start() -> None:
    metrics = create_metrics(tenants=["acme"])
    assert {str(o) for o in Outcome} <= set(REQUEST_OUTCOMES)
    for outcome in REQUEST_OUTCOMES:
        metrics.count_request(outcome, "acme")
        sample = {"outcome": outcome, "tenant": "acme"}
        assert metrics.registry.get_sample_value("settle_ledger_requests_total", sample) == 1
