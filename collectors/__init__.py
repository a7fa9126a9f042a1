"""Sources of samples (local, ssh, scrape, log, prom) and the fleet state. No UI here."""
