module kjit

go 1.19
