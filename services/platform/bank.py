"""The bank of the SEPA rail: where its host-to-host interface answers, the account settle
pays from, and how payment files are made (batch booking, the cut-off).

Used only when `SETTLE_RAILS` names `sepa`; the local defaults point at `settle banksim` and
a test account. In production the bank's address must be https on a host `SETTLE_RAIL_HOSTS`
names, and the debtor account must be set: a payment file names the account it debits, and a
default one is nobody's.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import time
from typing import Annotated

from pydantic import BeforeValidator, Field, field_validator

from services.domain.business_days import DEFAULT_CUTOFF, parse_cutoff
from services.domain.errors import ConfigError
from services.domain.sepa import MAX_CREDITOR_NAME, compact_iban
from services.platform.config import LOCAL_SEPA_BANK_URL, Section
from services.platform.rail_hosts import pinned_refusals

LOCAL_DEBTOR_IBAN = "DE89370400440532013000"  # a well-known example account, nobody's money
LOCAL_DEBTOR_NAME = "settle platform"


def _cutoff(value: object) -> object:
    return parse_cutoff(value) if isinstance(value, str) else value


class BankSection(Section):
    """The SEPA rail's bank and the account settle pays from; see the module docstring."""

    sepa_bank_url: str = Field(LOCAL_SEPA_BANK_URL, alias="SETTLE_SEPA_BANK_URL")
    sepa_debtor_iban: str = Field(LOCAL_DEBTOR_IBAN, alias="SETTLE_SEPA_DEBTOR_IBAN")
    sepa_debtor_name: str = Field(
        LOCAL_DEBTOR_NAME,
        alias="SETTLE_SEPA_DEBTOR_NAME",
        min_length=1,
        max_length=MAX_CREDITOR_NAME,
    )
    sepa_debtor_bic: str | None = Field(
        None, alias="SETTLE_SEPA_DEBTOR_BIC", pattern=r"^[A-Z0-9]{8}([A-Z0-9]{3})?$"
    )
    sepa_batch_booking: bool = Field(True, alias="SETTLE_SEPA_BATCH_BOOKING")
    sepa_cutoff: Annotated[time, BeforeValidator(_cutoff)] = Field(
        DEFAULT_CUTOFF, alias="SETTLE_SEPA_CUTOFF"
    )

    @field_validator("sepa_bank_url")
    @classmethod
    def _bank_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/")

    @field_validator("sepa_debtor_iban")
    @classmethod
    def _debtor_iban(cls, value: str) -> str:
        return compact_iban(value)  # ValueError, saying why, for any but a SEPA IBAN

    def bank_refusals(self, hosts: frozenset[str]) -> Iterator[ConfigError]:
        """Production's rule for the bank: https to a host of `hosts` (SETTLE_RAIL_HOSTS),
        and an account of settle's own."""
        yield from pinned_refusals(
            "SETTLE_SEPA_BANK_URL",
            self.sepa_bank_url,
            hosts,
            "payment files and statements go over it",
        )
        if "sepa_debtor_iban" not in self.model_fields_set:
            yield ConfigError(
                "SETTLE_SEPA_DEBTOR_IBAN", "is unset; production pays from an account of its own"
            )
