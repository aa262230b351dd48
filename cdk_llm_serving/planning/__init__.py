"""Pure-Python planning: instance facts, sizing and cost. Imports nothing from CDK."""
