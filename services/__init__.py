"""settle's runtime services (ledger, relay, inbox) and the code they share; the rail
simulator (railsim) and the commands around them (tools) are packages of their own."""
