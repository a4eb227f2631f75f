"""A whole listing of the bank's files or reports, read page by page: each page's `next`
followed from the first page until one comes back empty, reports of one kind only if asked."""

from __future__ import annotations

from services.adapters.sepa.bank import Bank, Listed


class PagedBank(Bank):
    """A bank whose listings are pages held in memory; each call is recorded."""

    def __init__(self, pages: dict[str | None, Listed]) -> None:
        super().__init__("http://127.0.0.1:9", timeout=1.0)
        self.pages = pages
        self.asked: list[tuple[str, str | None, str | None]] = []

    async def files(self, after: str | None = None, limit: int = 500) -> Listed:
        self.asked.append(("files", after, None))
        return self.pages.get(after, Listed([], None))

    async def reports(
        self, after: str | None = None, limit: int = 500, kind: str | None = None
    ) -> Listed:
        self.asked.append(("reports", after, kind))
        return self.pages.get(after, Listed([], None))


THREE_PAGES = {
    None: Listed([{"id": "a"}, {"id": "b"}], "2"),
    "2": Listed([{"id": "c"}], "3"),
}


async def test_every_item_is_listed_in_the_banks_order_to_the_first_empty_page() -> None:
    bank = PagedBank(THREE_PAGES)
    items = [item["id"] async for item in bank.listed("files")]
    assert items == ["a", "b", "c"]
    assert bank.asked == [("files", None, None), ("files", "2", None), ("files", "3", None)]
    await bank.aclose()


async def test_reports_are_listed_of_the_kind_asked_and_each_page_ends_at_its_cursor() -> None:
    bank = PagedBank(THREE_PAGES)
    cursors = [page.next async for page in bank.listing_pages("reports", kind="camt.053")]
    assert cursors == ["2", "3"]  # the empty page that ends the listing is not yielded
    assert {kind for _, _, kind in bank.asked} == {"camt.053"}
    await bank.aclose()


async def test_an_empty_listing_yields_nothing() -> None:
    bank = PagedBank({})
    assert [item async for item in bank.listed("reports")] == []
    assert bank.asked == [("reports", None, None)]
    await bank.aclose()
