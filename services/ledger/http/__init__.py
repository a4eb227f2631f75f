"""The ledger's HTTP API (SPEC 3, "Ledger HTTP API"); `create_app` builds it from its ports."""

from services.ledger.http.factory import create_app

__all__ = ["create_app"]
