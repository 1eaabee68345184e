"""Protocol adapters: other queue services' wire protocols over the broker services."""
