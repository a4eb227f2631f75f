"""`settle archive --before YYYY-MM --operator NAME [--dry-run]`: detach the history's whole
months older than a month, for an archiver to dump (services/operations/archive.py).

Prints one line per partition detached (or, with --dry-run, that would be), then the month
refused, if one is. Exit status as the other operator commands: 0 every month older than
`--before` detached, 1 a month refused (the older ones are detached), 2 PostgreSQL
unreadable or a bad argument.
"""

from __future__ import annotations

import click

from services.commands.common import DONE, REFUSED, UNREADABLE, database, fail, run
from services.operations.archive import detach_month, parse_month, plan
from services.platform.clock import utc_now
from services.platform.service_settings import Settings


@click.command()
@click.option("--before", "before_text", required=True, help="Detach months older than YYYY-MM.")
@click.option("--operator", default="", help="Who archives: the name the audit row keeps.")
@click.option("--dry-run", is_flag=True, help="Print what would be detached; detach nothing.")
def archive(before_text: str, operator: str, dry_run: bool) -> None:
    """Detach whole months of settlement history older than --before, for archiving."""
    try:
        before = parse_month(before_text)
    except ValueError as e:
        fail("archive", False, "invalid_month", str(e), UNREADABLE)
    now = utc_now()
    if (before.year, before.month) > (now.year, now.month):
        # The current month and the ones ahead take writes; they are never archived.
        fail("archive", False, "month_not_past", f"{before_text} is after this month", UNREADABLE)
    if not dry_run and not operator:
        fail("archive", False, "operator_required", "--operator names who archives", UNREADABLE)

    async def work(settings: Settings) -> int:
        async with database(settings, as_owner=True) as pool, pool.acquire() as conn:
            found = await plan(conn, before)
            for month, parts in found.detach:
                if not dry_run:
                    await detach_month(conn, month, parts, operator)
                for table, name in parts:
                    verb = "would detach" if dry_run else "detached"
                    click.echo(f"{verb} {name} ({table}, {month:%Y-%m})")
        if found.refused is not None:
            click.echo(f"settle archive: {found.refused}", err=True)
            return REFUSED
        return DONE

    raise SystemExit(run("archive", False, work))
