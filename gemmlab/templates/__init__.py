"""Kernel templates: find them, read their headers, validate parameters and launch geometry. Nothing here
needs a GPU or cupy.

One module per idea, each importing only those before it:
- file.py: a template file's name (NAME.cu.j2, NN_NAME.cu.j2) and where its header sits;
- sandbox.py: the Jinja sandbox the body and header expressions run in, and evaluating those expressions;
- variant.py: Variant, a template's contract (Param, Constraint), and what follows from it: resolved
  values, the sample of configurations, the launch Geometry and the kernel's arguments;
- inherit.py: `from`, a template starting from another's header and body (merge, resolve);
- header.py: reading and checking a header into a Variant (load_variant); its docstring is the format;
- catalog.py: where templates are found (builtin_dir, user_dirs, data_dir), discover and the Catalog.

The names other modules use are importable from here.
"""

from .catalog import Catalog, builtin_dir, data_dir, default_user_dir, discover, user_dirs
from .file import HEADER_RE, NAME_RE, SUFFIX, name_of
from .header import C_TYPES, DTYPES, load_variant
from .variant import ARGUMENTS, Constraint, Geometry, Param, Variant, show_params, show_value

__all__ = ["Catalog", "builtin_dir", "data_dir", "default_user_dir", "discover", "user_dirs", "HEADER_RE",
           "NAME_RE", "SUFFIX", "name_of", "C_TYPES", "DTYPES", "load_variant", "ARGUMENTS", "Constraint",
           "Geometry", "Param", "Variant", "show_params", "show_value"]
