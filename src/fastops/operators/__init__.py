"""Operators: the logic that tasks run (see ``base.Operator``)."""
from fastops.operators.base import Operator, OperatorContext, Tagged

__all__ = ["Operator", "OperatorContext", "Tagged"]
