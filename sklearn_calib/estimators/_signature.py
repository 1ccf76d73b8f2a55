"""The constructor signature of a net: its own parameters and those it passes to skorch.

scikit-learn prints an estimator with the parameters that differ from the defaults of its
``__init__`` signature (``print_changed_only``, also inside a Pipeline or a search). A
net's ``__init__`` names its own parameters and passes the rest (skorch's
``iterator_train``, ``predict_nonlinearity``, ...; a subclass's ``lr``, ``max_epochs``,
...) on through ``**kwargs``, so their defaults are not in its signature and they would
print as if set. :func:`declare_inherited_parameters` adds them to the signature.
"""

import inspect


def declare_inherited_parameters(cls):
    """Give ``cls.__init__`` a signature with the defaulted parameters of its bases.

    The signature is ``cls.__init__``'s own, with every parameter that a base class's
    ``__init__`` gives a default and ``cls.__init__`` does not name added as a
    keyword-only parameter (before ``**kwargs``). Nothing happens when ``cls`` defines no
    ``__init__`` or takes no ``**kwargs``.

    Parameters
    ----------
    cls : type
    """
    init = cls.__dict__.get("__init__")
    if init is None:
        return
    own = list(inspect.signature(init).parameters.values())
    var_keyword = [p for p in own if p.kind is p.VAR_KEYWORD]
    if not var_keyword:
        return
    names = {p.name for p in own}
    inherited = []
    for base in cls.__mro__[1:]:
        if "__init__" not in base.__dict__ or base is object:
            continue
        for param in inspect.signature(base.__dict__["__init__"]).parameters.values():
            defaulted = param.default is not param.empty and param.kind in (
                param.POSITIONAL_OR_KEYWORD,
                param.KEYWORD_ONLY,
            )
            if defaulted and param.name not in names:
                names.add(param.name)
                inherited.append(param.replace(kind=param.KEYWORD_ONLY))
    parameters = [p for p in own if p.kind is not p.VAR_KEYWORD] + inherited + var_keyword
    init.__signature__ = inspect.Signature(parameters)


__all__ = ["declare_inherited_parameters"]
