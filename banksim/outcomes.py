"""What becomes of each transfer of a taken file: decided once, at intake, and kept.

In this order: the bank's own checks (an amount in euro, to the cent, within SEPA's limit;
creditor and debit accounts given by valid IBANs of the SEPA zone), then what the sender
asked for in the remittance, then the fault profile's dice, seeded by (seed, EndToEndId), so
a restart, or a second file with the same EndToEndId, decides the same.

Remittance conventions, anywhere in RmtInf/Ustrd:
    reject:CODE       rejected at intake with ISO reason CODE (reject:AC04)
    return:CODE:N     booked, then returned with reason CODE N business days later
                      (return:MD07:3)
"""

from __future__ import annotations

import re
from datetime import date
from enum import StrEnum
from typing import NamedTuple

from banksim import dice
from banksim.faults import Faults
from banksim.iso import minor_units
from banksim.pain001 import Instruction
from services.domain.sepa import is_sepa_iban

ASKED_REJECT = re.compile(r"\breject:([A-Z0-9]{4})\b")
ASKED_RETURN = re.compile(r"\breturn:([A-Z0-9]{4}):(\d{1,3})\b")
SEPA_MAX_MINOR = 99_999_999_999  # 999,999,999.99 EUR, the SEPA credit transfer's ceiling


class Fate(NamedTuple):
    """How a transfer ends at this bank."""

    reject: str | None  # ISO reason it is rejected with at intake; None if accepted
    return_reason: str | None  # ISO reason it comes back with after booking; None if not
    return_days: int  # business days from its booking to its return
    charged: bool  # whether its booking costs a fee, booked as an entry of its own


class Loss(StrEnum):
    """How an upload's answer is lost after the file was taken."""

    DROPPED = "dropped"  # the connection closes mid-answer
    GATEWAY_TIMEOUT = "gateway_timeout"  # a 504, as from a proxy that gave up waiting


class Delay(NamedTuple):
    """How much later than due a statement is delivered."""

    days: int  # business days after the day it is due
    held_back: bool  # delivered after the statements due that day: its sequence number gaps


def fate(instruction: Instruction, debtor_iban: str | None, faults: Faults) -> Fate:
    """The fate of one transfer: the bank's checks, then the remittance, then the dice."""
    refused = checked(instruction, debtor_iban)
    if refused is not None:
        return Fate(refused, None, 0, False)
    asked = ASKED_REJECT.search(instruction.remittance)
    if asked:
        return Fate(asked.group(1), None, 0, False)
    subject, seed = instruction.end_to_end_id, faults.seed
    charged = dice.chance(seed, "charge", subject, faults.charge)
    asked = ASKED_RETURN.search(instruction.remittance)
    if asked:
        return Fate(None, asked.group(1), int(asked.group(2)), charged)
    rejected = dice.pick(seed, "reject", subject, faults.rejects)
    if rejected is not None:
        return Fate(rejected, None, 0, False)
    returned = dice.pick(seed, "return", subject, faults.returns)
    low, high = faults.return_days_min, faults.return_days_max
    days = dice.between(seed, "return_days", subject, low, high) if returned else 0
    return Fate(None, returned, days, charged)


def checked(instruction: Instruction, debtor_iban: str | None) -> str | None:
    """The ISO reason the bank itself rejects a transfer with, or None if it passes."""
    if debtor_iban is None or not is_sepa_iban(debtor_iban):
        return "AC02"  # InvalidDebtorAccountNumber
    if instruction.creditor_iban is None or not is_sepa_iban(instruction.creditor_iban):
        return "AC01"  # IncorrectAccountNumber
    if instruction.currency != "EUR":
        return "AM03"  # NotAllowedCurrency
    minor = minor_units(instruction.amount)
    if minor is None:
        return "AM12"  # InvalidAmount
    if minor <= 0:
        return "AM01"  # ZeroAmount
    if minor > SEPA_MAX_MINOR:
        return "AM02"  # NotAllowedAmount
    return None


def batch_forced(msg_id: str, pmt_inf_id: str, faults: Faults) -> bool:
    """Whether a block that asked for single booking is booked as one batch all the same."""
    return dice.chance(faults.seed, "batch_forced", f"{msg_id}/{pmt_inf_id}", faults.batch_forced)


def answer_loss(msg_id: str, faults: Faults) -> Loss | None:
    """Whether, and how, the answer to the upload of file `msg_id` is lost."""
    if not dice.chance(faults.seed, "lost_answer", msg_id, faults.lost_answer):
        return None
    dropped = dice.chance(faults.seed, "lost_how", msg_id, faults.lost_answer_dropped)
    return Loss.DROPPED if dropped else Loss.GATEWAY_TIMEOUT


def statement_delay(iban: str, day: date, faults: Faults) -> Delay:
    """How late the statement of `iban` for `day` is delivered."""
    subject = f"{iban}/{day.isoformat()}"
    if dice.chance(faults.seed, "statement_missing", subject, faults.statement_missing):
        return Delay(max(1, faults.statement_missing_days), held_back=True)
    if dice.chance(faults.seed, "statement_late", subject, faults.statement_late):
        return Delay(1, held_back=False)
    return Delay(0, held_back=False)
