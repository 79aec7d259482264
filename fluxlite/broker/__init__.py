"""The broker process: lifecycle, the one dispatch loop (router), attributes,
logging, the warm fork server for job shells (spawner), and the launcher that
`fluxlite start` uses to bring a whole instance up on one machine."""
