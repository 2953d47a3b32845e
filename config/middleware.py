from django.contrib.auth.middleware import LoginRequiredMiddleware


class LoginRequiredExceptApiMiddleware(LoginRequiredMiddleware):
    """Every page needs a signed-in user; the JSON API authenticates itself (a 401, not a
    redirect to the login form)."""

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)
