"""The Stripe rail (and the simulator that speaks its API): the HTTP client, the address
rule, paging, and Stripe objects read into the rail port's values."""
