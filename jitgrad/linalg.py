"""torch.linalg: decompositions, solvers, inverses, determinants, norms and products, differentiable, batched over
leading dims, in float32 and float64 (LAPACK on the CPU; see docs/linalg.md)."""
from .ops._linalg_args import LinAlgError  # noqa: F401
from .ops.decompositions import (cholesky, cholesky_ex, eigh, eigvalsh, householder_product, lu, lu_factor,  # noqa: F401
                                 lu_factor_ex, qr, solve_triangular, svd, svdvals)
from .ops.eig import eig, eigvals  # noqa: F401
from .ops.linalg import matmul  # noqa: F401
from .ops.matrix_functions import (cond, det, matrix_exp, matrix_norm, matrix_rank, norm, slogdet,  # noqa: F401
                                   vector_norm)
from .ops.products import cross, diagonal, multi_dot, vander, vecdot  # noqa: F401
from .ops.solvers import (inv, inv_ex, lstsq, lu_solve, matrix_power, pinv, solve, solve_ex, tensorinv,  # noqa: F401
                          tensorsolve)

__all__ = ["LinAlgError", "cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals",
           "eigvalsh", "householder_product", "inv", "inv_ex", "lstsq", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "matmul",
           "matrix_exp", "matrix_norm", "matrix_power", "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet",
           "solve", "solve_ex", "solve_triangular", "svd", "svdvals", "tensorinv", "tensorsolve", "vander", "vecdot",
           "vector_norm"]
