"""pyverbs' libibverbs enums under one name, `e`, whatever the rdma-core:
up to rdma-core 56 they are module-level constants of pyverbs.enums
(e.IBV_WC_SUCCESS); rdma-core 65 has pyverbs.libibverbs_enums with one
enum class per C enum (ibv_wc_status.IBV_WC_SUCCESS), flattened here."""
import enum
import types

try:
    import pyverbs.enums as e
except ImportError:
    import pyverbs.libibverbs_enums as _m

    e = types.SimpleNamespace(**{
        name: member
        for c in vars(_m).values() if isinstance(c, type) and issubclass(c, enum.Enum)
        for name, member in c.__members__.items()
    })


def _flatten(module):
    """The members of a module's enum classes, by name."""
    return types.SimpleNamespace(**{
        name: member
        for c in vars(module).values() if isinstance(c, type) and issubclass(c, enum.Enum)
        for name, member in c.__members__.items()
    })


def mlx5dv_enums():
    """libmlx5's direct-verbs enums the same way (MLX5DV_DCTYPE_DCT, ...):
    constants of pyverbs.providers.mlx5.mlx5_enums up to rdma-core 56,
    enum classes of it in 65."""
    import pyverbs.providers.mlx5.mlx5_enums as dv
    return dv if hasattr(dv, "MLX5DV_DCTYPE_DCT") else _flatten(dv)
