"""Jobs as data: jobspec build/validate, states and results, resource sets (R),
eventlog entries and KVS keys, and the small client API the CLI uses."""
