"""The pure domain: state machines, money, ids, break and rail-event rules, the rail port.
No I/O; imports nothing of settle but itself."""
