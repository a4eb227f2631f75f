"""Code the ledger, relay and inbox services share: configuration, money, ids, storage, codecs."""
