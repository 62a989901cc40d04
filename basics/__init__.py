"""What every layer shares, once, at the bottom (``docs/architecture.md``: imports point down).

Nothing here imports ``ebf``, ``mondrian``, ``pipelines``, ``cluster`` or Dask; each module
is named for what it holds:

``mixture``     the predictive Gaussian mixture every regressor returns, and its one-pass
                summary (mean, std, quantiles); its numba kernels in ``mixture_kernels``
``config``      the numba flags of those kernels
``metrics``     RMSE, NLPD, coverage and calibration tables of predictive distributions
``validation``  input checks whose errors name the column, the count and the fix
``bounds``      the range of every float a saved model stores, checked when it is loaded
``columns``     the column-kind vocabulary (pandas and Arrow dtypes) and how models encode it
``seeds``       ``random_state`` to a stored integer seed, and the seed tree of every model
``threads``     ``n_jobs`` to a number of threads
``tasks``       the task names and their integer codes in numba kernels
``places``      paths on the local file system or fsspec alike; small files read within a
                limit and replaced atomically
``atomic``      atomic output directories (local or fsspec) and the rules for replacing one
``versions``    the installed version of the library
"""
