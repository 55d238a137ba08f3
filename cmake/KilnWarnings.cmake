# Strict warnings for kiln's own targets (not for third-party code).
function(kiln_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wpedantic -Wshadow
                                           -Wnon-virtual-dtor)
endfunction()

# A layer library: public headers from include/, internal headers from src/.
function(kiln_layer target)
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_features(${target} PUBLIC cxx_std_20)
  kiln_warnings(${target})
endfunction()
