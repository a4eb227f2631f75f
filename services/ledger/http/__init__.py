"""The ledger's HTTP API: `create_app` builds the tenant-facing app, `create_admin_app` the
admin port's."""

from services.ledger.http.factory import create_admin_app, create_app

__all__ = ["create_admin_app", "create_app"]
