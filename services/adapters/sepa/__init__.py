"""The SEPA credit transfer rail: ISO 20022 files to and from a bank."""
