"""The console's pages, one module per group; each gives its Starlette routes."""
