// cpp_only_file.hpp: included last by the files of the pure C++ core (counter_table.cpp,
// header_only.cpp, time_bucket.cpp), which must build without PostgreSQL: including a PostgreSQL
// header into one of them is a compile error, not a convention.
#pragma once

#if defined(POSTGRES_H) || defined(PG_VERSION_NUM) || defined(C_H)
#error "a file of the pure C++ core includes a PostgreSQL header"
#endif
