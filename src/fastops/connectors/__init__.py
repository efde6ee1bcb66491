"""Sources and sinks; ``base`` holds the protocols the runtime programs against."""
