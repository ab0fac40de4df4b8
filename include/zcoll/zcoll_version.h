/* zcoll version. CMakeLists.txt reads the project version from these three lines. */
#ifndef ZCOLL_ZCOLL_VERSION_H_
#define ZCOLL_ZCOLL_VERSION_H_

#define ZCOLL_MAJOR 0
#define ZCOLL_MINOR 1
#define ZCOLL_PATCH 0
#define ZCOLL_VERSION_CODE (ZCOLL_MAJOR * 10000 + ZCOLL_MINOR * 100 + ZCOLL_PATCH)

#endif /* ZCOLL_ZCOLL_VERSION_H_ */
