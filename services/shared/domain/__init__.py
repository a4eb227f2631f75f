"""Pure domain code shared by the services: state machines, posting rules, keys. No I/O."""
