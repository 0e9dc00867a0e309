"""Terminal views (rich) of Myriad's results; the CLI decides which to print."""
