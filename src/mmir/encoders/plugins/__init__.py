"""Python plug-ins (``backend: plugin``): a ``dense``, ``mm`` or ``multivector`` system's encoder, or a reranker, that is
an object built by a factory outside mmir (docs: Your own system).

- :mod:`.protocols`: what the object must provide per kind, and the optional ``fit(documents)`` hook.
- :mod:`.loader`: ``factory`` (``package.module:function`` or an entry point of the group ``mmir.plugins``) to the
  object and its :class:`PluginIdentity` (the sha256 of the code imported, with the distribution and version that installed it).
- :mod:`.caller`: one plug-in called batch by batch, every output checked (:mod:`.checks`), errors naming the
  config entry, the factory and the batch.
- :mod:`.encoders`: the encoders the encode and retrieve steps use for each kind.
"""

from mmir.encoders.plugins.caller import PluginCaller, texts_sha256
from mmir.encoders.plugins.encoders import PluginMMEncoder, PluginMultiVectorEncoder, PluginTextEncoder, make_plugin_encoder
from mmir.encoders.plugins.loader import PluginError, PluginIdentity, identify, load
from mmir.encoders.plugins.protocols import DensePlugin, Fittable, MMPlugin, MultiVectorPlugin, RerankerPlugin

__all__ = ["DensePlugin", "Fittable", "MMPlugin", "MultiVectorPlugin", "PluginCaller", "PluginError", "PluginIdentity",
           "PluginMMEncoder", "PluginMultiVectorEncoder", "PluginTextEncoder", "RerankerPlugin", "identify", "load",
           "make_plugin_encoder", "plugin_params", "texts_sha256"]


def plugin_params(entry: dict, where: str) -> dict[str, str]:
    """``{"plugin": <identity label>}`` for a ``backend: plugin`` config entry (a filled dict), else ``{}``: added to a
    job's params, so Snakemake reruns the job when the plug-in's code or version changes.

    Raises:
        PluginError: the factory cannot be found.
    """
    if entry.get("backend") != "plugin":
        return {}
    return {"plugin": identify(entry["factory"], where).label}
