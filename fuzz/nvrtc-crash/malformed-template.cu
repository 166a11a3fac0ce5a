template <typename ~> __global__ void t(T* p) { *p = T(1); }
