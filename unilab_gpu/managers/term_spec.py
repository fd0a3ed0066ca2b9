"""What a term declares beside its definition for the parts of the project that meet it by path.

A task config names a term by ``func`` path; the env runs it, and three other parts need
something of their own for it:

- symmetry augmentation (``algo.mirror_fraction``) mirrors an observation term by its **mirror
  rule**, ``rule(symmetry, term, dim, where) -> (index, sign)`` (:mod:`unilab_gpu.envs.mirror_map`);
- the torch-free deploy runtime computes a policy's observation terms, checks its failure
  terminations and feeds its commands through **numpy twins** (:mod:`unilab_gpu.deploy.terms`,
  :mod:`unilab_gpu.deploy.terminations`): a reader builder, a fall-check builder, or a command
  kind (``"velocity"``, ``"motion"``).

The term says both where it is defined::

    @term(mirror=mirror_map.joints, deploy=twins.joint_vel)
    def joint_vel(env: EnvView) -> torch.Tensor: ...

    @term(mirror=None, deploy=None)  # privileged: no mirror image, no robot measures it
    def root_height(env: EnvView) -> torch.Tensor: ...

``None`` declares that the term has none (symmetry augmentation and the runtime refuse it, naming
it); a keyword left out is not declared. The deploy runtime cannot import a torch module, so it
keeps its own tables keyed by the env term's path; ``tests/test_term_spec.py`` checks that they
and these declarations agree, and that every term a task under ``configs/task`` configures
declares what it needs. The decorator returns the term itself, unwrapped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

UNDECLARED: Any = type("Undeclared", (), {"__repr__": lambda self: "UNDECLARED"})()
"""A keyword a term's :func:`term` did not give (``None`` is a declaration: "has none")."""

T = TypeVar("T", bound=Callable[..., Any])


@dataclass(frozen=True)
class TermSpec:
    """A term's declarations (each :data:`UNDECLARED`, ``None`` or the thing itself)."""

    mirror: Any = UNDECLARED
    """Observation terms: the mirror rule ``rule(symmetry, term, dim, where) -> (index, sign)``."""
    deploy: Any = UNDECLARED
    """The numpy twin: an observation reader builder, a termination's fall-check builder, or a
    command's kind."""


_SPECS: dict[Any, TermSpec] = {}


def term(*, mirror: Any = UNDECLARED, deploy: Any = UNDECLARED) -> Callable[[T], T]:
    """Declare the mirror rule and the deploy twin of the function or class it decorates."""

    def declare(target: T) -> T:
        _SPECS[target] = TermSpec(mirror, deploy)
        return target

    return declare


def spec_of(target: Any) -> TermSpec:
    """The declarations of term ``target`` (the resolved function or class; a subclass declares its
    own); every field :data:`UNDECLARED` for a term that declared nothing."""
    return _SPECS.get(target, TermSpec())
