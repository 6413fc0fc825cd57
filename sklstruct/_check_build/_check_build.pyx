def check_build():
    return
