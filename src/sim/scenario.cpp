// Scenario parser: written by the market-sim work.
