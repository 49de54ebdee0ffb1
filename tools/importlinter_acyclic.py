"""An import-linter contract type that forbids import cycles between modules (``acyclic``).

Why not import-linter's own ``acyclic_siblings``: it squashes each package into one node, so it misses a cycle
through a package's ``__init__`` (``pkg.base`` importing ``pkg`` while ``pkg/__init__.py`` imports ``pkg.base``),
reports sibling packages whose modules form no cycle (``pkg.models/__init__`` re-exporting ``pkg.parse``, which
imports ``pkg.models.systems``), and names the imports to remove rather than the cycle. This contract reads the
module graph as grimp builds it (imports inside functions count: they run too) and reports every cycle as its
chain of modules and lines.

Configured in pyproject.toml (``contract_types = ["acyclic: tools.importlinter_acyclic.AcyclicContract"]``);
lint-imports puts the working directory on ``sys.path``, so run it from the project root.
"""

from __future__ import annotations

from collections import deque

import grimp
from importlinter import Contract, ContractCheck, fields, output


def strongly_connected(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """The strongly connected components of ``modules`` (imports among them only) with two or more modules, or one
    module importing itself; each sorted, the list sorted (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []

    def successors(m: str) -> list[str]:
        return sorted(graph.find_modules_directly_imported_by(m) & modules)

    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(successors(root)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    if len(comp) > 1 or node in graph.find_modules_directly_imported_by(node):
                        found.append(sorted(comp))
            elif nxt not in index:
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                on_stack.add(nxt)
                work.append((nxt, iter(successors(nxt))))
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
    return sorted(found)


def shortest_cycle(graph: grimp.ImportGraph, component: list[str]) -> list[str]:
    """A shortest cycle through the first module of ``component``: ``[m, ..., m]`` (breadth-first search)."""
    start, members = component[0], set(component)
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        m = queue.popleft()
        for n in sorted(graph.find_modules_directly_imported_by(m) & members):
            if n == start:
                chain = [m]
                while chain[-1] != start:
                    chain.append(parent[chain[-1]])
                return [start, *reversed(chain[:-1]), start] if m != start else [start, start]
            if n not in parent:
                parent[n] = m
                queue.append(n)
    raise AssertionError(f"{start} is in a strongly connected component but on no cycle")


class AcyclicContract(Contract):
    """No module of ``containers`` (packages, their descendants included) is on an import cycle."""

    type_name = "acyclic"

    containers = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        modules: set[str] = set()
        for container in self.containers:  # type: ignore[attr-defined]
            modules |= {container} | graph.find_descendants(container)
        cycles = []
        for component in strongly_connected(graph, modules):
            chain = shortest_cycle(graph, component)
            steps = []
            for importer, imported in zip(chain, chain[1:]):
                details = graph.get_import_details(importer=importer, imported=imported)
                line = min((d["line_number"] for d in details), default=None)
                steps.append({"importer": importer, "imported": imported, "line": line})
            cycles.append({"modules": component, "cycle": chain, "steps": steps})
        return ContractCheck(kept=not cycles, metadata={"cycles": cycles})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for c in check.metadata["cycles"]:
            output.print_error(f"Import cycle: {' -> '.join(c['cycle'])}")
            for s in c["steps"]:
                output.print_error(f"    {s['importer']} -> {s['imported']} (l.{s['line']})", bold=False)
            if len(c["modules"]) > len(c["cycle"]) - 1:
                output.print_error(f"    (one of the cycles among {len(c['modules'])} modules: {', '.join(c['modules'])})",
                                   bold=False)
            output.new_line()
