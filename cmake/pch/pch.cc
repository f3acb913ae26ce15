// Carrier of a precompiled header (cmake/gpusched.cmake, GPUSCHED_PCH): CMake compiles the header while building this
// target, and the project's other targets of the same compile flags reuse it.
