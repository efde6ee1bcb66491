"""Test helpers: independent reference models, strategies and worker scripts."""
