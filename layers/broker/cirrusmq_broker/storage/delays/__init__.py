"""Storage of delayed messages: delay items (TimersTable), delay objects (``timers/`` in
S3), and starting a release run (a Lambda invoke)."""
