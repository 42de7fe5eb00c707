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
