"""The backend that sessions signed in before the current release name (Django stores the
backend's path in the session and reads the user only through a backend still listed in
AUTHENTICATION_BACKENDS): it reads their user, so nobody is signed out by the upgrade, and
authenticates nobody, so a wrong password is still hashed once, by Django's ModelBackend."""

from django.contrib.auth.backends import ModelBackend


class CompiledModelBackend(ModelBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        return None
